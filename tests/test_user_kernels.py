"""The users' held-out set of the CPU-path coverage benchmark: its manifest
(benchmarks/user_kernels.json) is well formed, benchmarks/fetch_user_kernels.py writes each listed
file as it is at its commit (from a clone made here with git), and emulation_coverage --users finds
the fetched scripts and their import roots."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fetch_mod = _load("fetch_user_kernels")
coverage = _load("emulation_coverage")


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(repo), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def test_the_manifest_lists_at_least_eight_repositories_each_at_a_full_commit():
    data = fetch_mod.load_manifest()
    repos = data["repositories"]
    assert len(repos) >= 8
    assert len({r["repo"] for r in repos}) == len(repos)
    for entry in repos:
        assert entry["scripts"], entry["repo"]
        assert all(p.endswith(".py") for p in entry["scripts"])
        assert not set(entry["scripts"]) & set(entry.get("helpers", []))
        assert entry["repo"].split("/")[1].lower() != "tilelang"  # TileLang itself is the other two sets


def test_a_malformed_manifest_is_refused_by_name(tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"repositories": [{"repo": "a/b", "commit": "abc", "scripts": ["x.py"]}]}))
    with pytest.raises(fetch_mod.FetchError, match="'abc' is not a full 40-digit hash"):
        fetch_mod.load_manifest(bad)
    bad.write_text(json.dumps({"repositories": [{"repo": "a/b", "commit": "0" * 40, "scripts": ["../x.py"]}]}))
    with pytest.raises(fetch_mod.FetchError, match="not a path inside the repository"):
        fetch_mod.load_manifest(bad)


def test_fetch_writes_each_file_at_its_commit_from_a_local_clone(tmp_path):
    work = tmp_path / "clones" / "alice+kernels"
    work.mkdir(parents=True)
    _git(work, "init", "-q")
    first = _commit(work, {"k/gemm.py": "v1\n", "k/util.py": "u1\n", "test_k.py": "t1\n"}, "one")
    second = _commit(work, {"k/gemm.py": "v2\n", "k/util.py": "u2\n"}, "two")
    manifest = tmp_path / "user_kernels.json"
    manifest.write_text(json.dumps({"repositories": [
        {"repo": "alice/kernels", "commit": first, "scripts": ["k/gemm.py", "test_k.py"],
         "helpers": ["k/util.py"], "at": {"k/gemm.py": second}}]}))
    dest = tmp_path / "dest"
    written = fetch_mod.fetch(dest, tmp_path / "clones", manifest)
    assert written == {"alice/kernels": 3}
    out = dest / "alice__kernels"
    assert (out / "k" / "gemm.py").read_text() == "v2\n"  # its own commit
    assert (out / "k" / "util.py").read_text() == "u1\n"  # the repository's commit
    assert (out / "test_k.py").read_text() == "t1\n"
    assert json.loads((dest / "user_kernels.json").read_text())["repositories"][0]["commit"] == first
    # the benchmark takes the scripts from there, in manifest order
    assert [p.relative_to(dest).as_posix() for p in coverage.user_scripts(dest)] == [
        "alice__kernels/k/gemm.py", "alice__kernels/test_k.py"]
    # a bare clone serves as well
    shutil.rmtree(dest)
    bare = tmp_path / "bare"
    bare.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare / "alice+kernels")], check=True)
    fetch_mod.fetch(dest, bare, manifest)
    assert (dest / "alice__kernels" / "k" / "gemm.py").read_text() == "v2\n"


def test_a_clone_without_the_commit_says_how_to_get_it(tmp_path):
    work = tmp_path / "clones" / "alice+kernels"
    work.mkdir(parents=True)
    _git(work, "init", "-q")
    _commit(work, {"a.py": "x\n"}, "one")
    manifest = tmp_path / "m.json"
    missing = "1" * 40
    manifest.write_text(json.dumps({"repositories": [{"repo": "alice/kernels", "commit": missing,
                                                      "scripts": ["a.py"]}]}))
    with pytest.raises(fetch_mod.FetchError, match=f"lacks commit {missing}.*fetch origin"):
        fetch_mod.fetch(tmp_path / "dest", tmp_path / "clones", manifest)


def test_users_mode_needs_the_fetched_set_and_finds_its_import_roots(tmp_path):
    with pytest.raises(ValueError, match="fetch_user_kernels.py"):
        coverage.user_scripts(tmp_path)
    repo = tmp_path / "bob__lab"
    (repo / "src").mkdir(parents=True)
    (repo / "projects" / "one" / "tests").mkdir(parents=True)
    (repo / "projects" / "one" / "pyproject.toml").write_text("[project]\nname = 'one'\n")
    script = repo / "projects" / "one" / "tests" / "test_x.py"
    script.write_text("")
    assert coverage.import_roots(script, repo) == [repo / "projects" / "one", repo, repo / "src"]
