"""Fetch the users' kernels: TileLang kernels for CUDA written by TileLang's users in public
repositories, the held-out set of ``benchmarks/emulation_coverage.py --users``.

    .venv/bin/python benchmarks/fetch_user_kernels.py /tmp/user-kernels [--clones DIR] [--manifest FILE]

``benchmarks/user_kernels.json`` lists, for each repository, the commit and the files to take:
``scripts`` (each one runs on its own: a script run as ``__main__``, or a pytest file ``test_*.py``)
and ``helpers`` (modules and data the scripts import or read). Each repository is taken with
``git clone https://github.com/OWNER/NAME`` at its commit, and each listed file is written to
``DEST/OWNER__NAME/PATH`` exactly as it is at that commit (``git show COMMIT:PATH``; a file named in
the repository's ``at`` map is taken at the commit given there: a learner's solutions committed one
by one). ``--clones DIR``
takes existing clones instead where ``DIR/OWNER+NAME`` is one (a bare git directory or a work
tree holding the commit), and keeps new clones there for the next time. The manifest is copied
to ``DEST/user_kernels.json``; the coverage benchmark reads it there.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).resolve().with_name("user_kernels.json")
REQUIRED = ("repo", "commit", "scripts")


class FetchError(RuntimeError):
    pass


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    """The manifest, checked: every repository has ``owner/name``, a 40-digit commit, relative paths."""
    data = json.loads(Path(path).read_text())
    repos = data.get("repositories")
    if not isinstance(repos, list) or not repos:
        raise FetchError(f"{path}: no 'repositories' list")
    seen = set()
    for entry in repos:
        missing = [k for k in REQUIRED if k not in entry]
        if missing:
            raise FetchError(f"{path}: an entry lacks {', '.join(missing)}: {entry}")
        repo, commit = entry["repo"], entry["commit"]
        if repo.count("/") != 1 or repo in seen:
            raise FetchError(f"{path}: {repo!r} is not owner/name, or is listed twice")
        seen.add(repo)
        files = list(entry["scripts"]) + list(entry.get("helpers", []))
        for c in [commit, *entry.get("at", {}).values()]:
            if len(c) != 40 or any(d not in "0123456789abcdef" for d in c):
                raise FetchError(f"{path}: {repo}: commit {c!r} is not a full 40-digit hash")
        for rel in files:
            if rel.startswith("/") or ".." in Path(rel).parts:
                raise FetchError(f"{path}: {repo}: {rel!r} is not a path inside the repository")
        stray = sorted(set(entry.get("at", {})) - set(files))
        if stray:
            raise FetchError(f"{path}: {repo}: 'at' names {stray[0]!r}, which is not one of its files")
    return data


def folder_name(repo: str) -> str:
    """``owner/name`` -> the folder of its files in DEST: ``owner__name``."""
    return repo.replace("/", "__")


def _git(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True)


def _has_commit(git_dir: Path, commit: str) -> bool:
    return _git(["--git-dir", str(git_dir), "cat-file", "-e", f"{commit}^{{commit}}"]).returncode == 0


def _git_dir(path: Path) -> Path | None:
    """The git directory of a clone (bare, or a work tree), None if ``path`` is not one."""
    if not path.is_dir():
        return None
    found = _git(["rev-parse", "--absolute-git-dir"], cwd=path)
    if found.returncode:
        return None
    git_dir = Path(found.stdout.decode().strip())
    return git_dir if git_dir == path.resolve() or path.resolve() in git_dir.parents else None


def _clone(repo: str, commit: str, where: Path) -> Path:
    url = f"https://github.com/{repo}"
    done = _git(["clone", "--bare", "--filter=blob:none", url, str(where)])
    if done.returncode:
        raise FetchError(f"git clone {url} failed: {done.stderr.decode().strip()[-300:]}")
    if not _has_commit(where, commit):
        _git(["--git-dir", str(where), "fetch", "origin", commit])
    return where


def source_for(repo: str, commits: list[str], clones: Path | None, scratch: Path) -> Path:
    """The git directory to read ``repo`` at ``commits`` from: ``clones/OWNER+NAME`` if it is a clone,
    else a new clone from GitHub (kept under ``clones`` if given)."""
    slot = clones / repo.replace("/", "+") if clones else None
    git_dir = _git_dir(slot) if slot is not None else None
    if git_dir is None:
        target = slot if slot is not None and not slot.exists() else scratch / repo.replace("/", "+")
        git_dir = _clone(repo, commits[0], target)
    for commit in commits:
        if not _has_commit(git_dir, commit):
            _git(["--git-dir", str(git_dir), "fetch", "origin", commit])
        if not _has_commit(git_dir, commit):
            raise FetchError(f"{repo}: the clone at {git_dir} lacks commit {commit}; "
                             f"run `git -C {git_dir} fetch origin {commit}` (or remove it to clone afresh)")
    return git_dir


def fetch(dest: Path, clones: Path | None = None, manifest: Path = MANIFEST, log: Any = None) -> dict[str, int]:
    """Write every listed file to ``dest/OWNER__NAME/PATH``; returns the files written per repository."""
    data = load_manifest(manifest)
    dest.mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="user-kernels-") as tmp:
        for entry in data["repositories"]:
            repo, commit = entry["repo"], entry["commit"]
            at = entry.get("at", {})
            git_dir = source_for(repo, list(dict.fromkeys([commit, *at.values()])), clones, Path(tmp))
            out = dest / folder_name(repo)
            if out.exists():
                shutil.rmtree(out)
            for rel in list(entry["scripts"]) + list(entry.get("helpers", [])):
                where = at.get(rel, commit)
                shown = _git(["--git-dir", str(git_dir), "show", f"{where}:{rel}"])
                if shown.returncode:
                    raise FetchError(f"{repo}@{where[:12]}: no file {rel}: {shown.stderr.decode().strip()[:200]}")
                path = out / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(shown.stdout)
            written[repo] = len(entry["scripts"]) + len(entry.get("helpers", []))
            if log:
                print(f"{repo} @ {commit[:12]}: {len(entry['scripts'])} scripts, "
                      f"{len(entry.get('helpers', []))} helper files", file=log)
    (dest / "user_kernels.json").write_text(json.dumps(data, indent=1) + "\n")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", help="folder to write OWNER__NAME/PATH into")
    parser.add_argument("--clones", help="folder of existing clones (OWNER+NAME); new clones are kept there")
    parser.add_argument("--manifest", default=str(MANIFEST))
    args = parser.parse_args(argv)
    clones = Path(args.clones).resolve() if args.clones else None
    if clones:
        clones.mkdir(parents=True, exist_ok=True)
    try:
        written = fetch(Path(args.dest).resolve(), clones, Path(args.manifest), log=sys.stderr)
    except (FetchError, OSError, ValueError) as err:
        print(f"fetch_user_kernels: {err}", file=sys.stderr)
        return 1
    print(f"{sum(written.values())} files of {len(written)} repositories in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
