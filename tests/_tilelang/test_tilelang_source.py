"""The one parser of TileLang's generated texts (tilelab/_tilelang/source.py), on device code and a
launcher written by hand in the shape TileLang 0.1.15 emits: a forward declaration, two kernels, TMA
loads, a descriptor variable initialised twice; a TMA descriptor's fields and a cudaLaunchKernelEx
block. Every expected value below is read off the text by eye."""

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


# A C++ launcher written by hand in the shape TileLang 0.1.15's cython backend emits: one TMA
# descriptor, then a cudaLaunchKernelEx block with a dynamic grid.
LAUNCHER = textwrap.dedent('''\
    int call(half_t* A, half_t* C, int m, cudaStream_t stream=cudaStreamDefault) {
    \tCUtensorMap A_desc;
    \tCUtensorMapDataType A_desc_type= (CUtensorMapDataType)6;
    \tcuuint32_t A_desc_tensorRank= 2;
    \tvoid *A_desc_globalAddress= A;
    \tcuuint64_t A_desc_globalDim[2]= {512,m};
    \tcuuint32_t A_desc_boxDim[2]= {64,32};
    \tCUtensorMapSwizzle A_desc_swizzle= (CUtensorMapSwizzle)3;

    \tCUresult A_desc_result = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
        &A_desc, A_desc_type, A_desc_tensorRank, A_desc_globalAddress, A_desc_globalDim, A_desc_boxDim,
        A_desc_swizzle);

    \tif (A_desc_result != CUDA_SUCCESS) {
    \t\treturn -1;
    \t}
    \t{
    \t\tcudaLaunchConfig_t config;
    \t\tconfig.stream = stream;
    \t\tconfig.gridDim = dim3(((m + 63) / 64), 8, 1);
    \t\tconfig.blockDim = dim3(256, 1, 1);
    \t\tconfig.dynamicSmemBytes = 49152;
    \t\tcudaLaunchKernelEx(&config, copy_kernel, A_desc, C, m);
    \t}
    \treturn 0;
    }
''')


def test_launcher_launches_read_grid_block_and_shared_memory_as_written():
    assert source.launcher_launches(LAUNCHER) == {
        "copy_kernel": {"grid": ["((m + 63) / 64)", "8", "1"], "block": ["256", "1", "1"], "smem": "49152"}}


def test_launcher_tma_reads_each_field_written_before_the_encode_call():
    (desc,) = source.launcher_tma(LAUNCHER)
    # integers where the text spells one (an int cast included); enum casts and names as written
    assert desc == {"name": "A_desc", "kind": "tiled", "type": "(CUtensorMapDataType)6", "tensorRank": 2,
                    "globalAddress": "A", "globalDim": [512, "m"], "boxDim": [64, 32],
                    "swizzle": "(CUtensorMapSwizzle)3"}


def test_encode_calls_span_the_descriptor_from_its_declaration_to_the_call_end():
    # CUtensorMap A_desc; is line 2 (line 9 is blank), the encode call starts on line 10, closes on 12
    assert source.encode_calls(LAUNCHER, ["A_desc"]) == {"A_desc": (2, 10, 12)}


def test_int_literal_reads_casts_and_leaves_expressions():
    assert [source.int_literal(t) for t in ("256", " (int64_t)4096 ", "-1", "m", "(m + 63) / 64")] == \
        [256, 4096, -1, None, None]
