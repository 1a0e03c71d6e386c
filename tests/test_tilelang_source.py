"""The one parser of TileLang's generated CUDA (tilelab/_tilelang/source.py), on device code written
by hand in the shape TileLang 0.1.15 emits: a forward declaration, two kernels, TMA loads, and a
descriptor variable initialised twice. Every expected value below is read off the text by eye."""

import textwrap

from tilelab._tilelang import source

DEVICE = textwrap.dedent('''\
    extern "C" __global__ void qk_kernel(const CUtensorMap A_desc, half_t* __restrict__ C);
    extern "C" __global__ void __launch_bounds__(256, 1) qk_kernel(const CUtensorMap A_desc, half_t* __restrict__ C) {
      tl::prefetch_tma_descriptor(A_desc);
      tl::tma_load(A_desc, _mbarrier[0], (&(((half_t*)buf_dyn_shmem)[0])), 0, 0);
      tl::initialize_wgmma_descriptor<1, 1, 64>(desc_a, (&(((half_t*)A_shared)[0])));
      tl::initialize_wgmma_descriptor<1, 1, 64>(desc_b, (&(((half_t*)K_shared)[0])));
      tl::wgmma_ss<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 128, 16, false, false, 1, 1>(uint64_t(desc_a + 0), uint64_t(desc_b + 2), ((uint32_t*)(acc + 0)), 1);
      tl::initialize_wgmma_descriptor<1, 1024, 64>(desc_b, (&(((half_t*)V_shared)[0])));
      tl::wgmma_rs<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 64, 64, 16, false, true, 1, 1>(((uint32_t*)(p + 0)), uint64_t(desc_b + 0), ((uint32_t*)(acc_o + 0)), 1);
    }

    extern "C" __global__ void __launch_bounds__(128) fill_kernel(half_t* __restrict__ C) {
      C[((int)threadIdx.x)] = half_t(0);
    }
''')  # noqa: E501 the device code as TileLang writes it, one statement a line


def test_kernels_are_named_once_each_in_order_declarations_included():
    assert source.source_kernels(DEVICE) == ["qk_kernel", "fill_kernel"]


def test_each_definition_has_its_own_body():
    bodies = dict(source.kernel_bodies(DEVICE))
    assert list(bodies) == ["qk_kernel", "fill_kernel"]  # the forward declaration has no body
    assert "tl::wgmma_rs" in bodies["qk_kernel"] and "half_t(0)" not in bodies["qk_kernel"]
    assert bodies["fill_kernel"].strip() == "C[((int)threadIdx.x)] = half_t(0);\n}"


def test_descriptor_uses_leave_out_the_kernel_declarations():
    lines = DEVICE.split("\n")
    assert source.descriptor_use_lines(lines, "A_desc") == (3, 4)
    assert source.descriptor_use_lines(lines, "A_de") == ()  # a whole identifier, not a prefix


def test_wgmma_lines_are_the_issue_and_its_descriptors_initialisations():
    lines = DEVICE.split("\n")
    assert source.wgmma_lines(lines, "ss", "m64n128k16", [(1, 1, 64), (1, 1, 64)]) == (5, 6, 7)
    assert source.wgmma_lines(lines, "rs", "m64n64k16", [(1, 1024, 64)]) == (8, 9)
    assert source.wgmma_lines(lines, "ss", "m64n64k16", []) == ()  # no ss call of that shape


def test_both_readings_of_the_wgmma_calls_follow_the_latest_initialisation():
    calls = source.source_wgmma_calls(DEVICE)
    assert calls == {
        "qk_kernel": [
            {"variant": "ss", "a_var": "desc_a", "b_var": "desc_b",
             "a": ("A_shared", 1, 1, 64), "b": ("K_shared", 1, 1, 64)},
            {"variant": "rs", "a_var": None, "b_var": "desc_b", "a": None, "b": ("V_shared", 1, 1024, 64)},
        ],
        "fill_kernel": [],
    }
    assert source.source_wgmma(DEVICE) == [
        ("qk_kernel", "m64n128k16", "ss", "K", "K", ("A_shared", 1, 1, 64), ("K_shared", 1, 1, 64)),
        ("qk_kernel", "m64n64k16", "rs", "K", "MN", None, ("V_shared", 1, 1024, 64)),
    ]


def test_top_level_commas_split_template_arguments():
    assert source.split_top_level("tl::DataType::kFloat16, 64, f(a, b), {1, 2}") == [
        "tl::DataType::kFloat16", "64", "f(a, b)", "{1, 2}"]
