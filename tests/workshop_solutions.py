"""Solutions to the workshop notebooks' exercises, by exercise id: the source that replaces each
answer cell when the tests run a notebook "as a learner who got everything right".

Kept in tests/, not in notebooks/, so learners do not see them next to the exercises.
"""

SOLUTIONS = {
    "01.1": "def chunk(row, chunk):\n    return chunk ^ (row % 8)\n\n\nanswer_01_1 = chunk",
    "01.2": "answer_01_2 = 32",
    "01.3": "answer_01_3 = 4",
    "01.4": 'answer_01_4 = "64B"',
    "01.5": "answer_01_5 = 1024",
    "02.1": "answer_02_1 = (32, 128)",
    "02.2": 'answer_02_2 = "m64n64k16"',
    "02.3": "answer_02_3 = 64",
    "03.1": '''def my_copy(M, N, block_M=64, block_N=128):
    @T.prim_func
    def copy(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                B[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j]

    return copy


answer_03_1 = my_copy(1024, 2048)''',
    "03.2": '''def fast_copy(M, N, block_M=64, block_N=256):
    @T.prim_func
    def copy(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), T.float16)
            T.copy(A[by * block_M, bx * block_N], tile)
            T.copy(tile, B[by * block_M, bx * block_N])

    return copy


answer_03_2 = fast_copy(8192, 8192)''',
    "04.1": 'answer_04_1 = "16x16x16"',
    "04.2": "answer_04_2 = 16384",
    "04.3": "answer_04_3 = (2, 0)",
}
