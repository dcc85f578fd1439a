// The reference of the operand emitter (dev/cuda/fused_operands.cuh) for its test and bench: the same operands made by
// the separate quantizers of llmc/mxfp4.cuh from the producer's BF16 output.
#ifndef DEV_CUDA_FUSED_REFERENCE_CUH
#define DEV_CUDA_FUSED_REFERENCE_CUH

#include "dev/cuda/fused_operands.cuh"

// the same operands through the separate quantizers, from x [N x C], the producer's BF16 output (e->bf16 is not
// written): the reference path
static inline void quantize_operands_separate(const OperandEmit* e, const floatX* x, int N, int C, cudaStream_t s) {
    emit_check_shapes(e, N, C);
    if (e->rows) { mx_quantize_rows_e4m3(e->rows, x, N, C, e->row_opt, s); }
    if (e->row_codes) { mx_quantize_rows(e->row_codes, x, N, C, e->row_opt, s); }
    if (e->cols) { mx_quantize_cols(e->cols, x, N, C, e->col_opt, e->col_sq, e->col_sq_scratch, s); }
}

#endif
