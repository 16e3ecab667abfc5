/* packed.cuh — what the packed formats' kernels share on the device
 * (engine/gpu/packed.cu: gpu.pcsr, gpu.psell; engine/gpu/pbsr.cu:
 * gpu.pbsr): decoding a value of the shared value modes
 * (spmv_packed_values) in registers, the u8 table in shared memory, and
 * the dispatch of a launcher over dtype x value mode.
 */
#ifndef SPMV_GPU_PACKED_CUH
#define SPMV_GPU_PACKED_CUH

#include "gpu.cuh"

/* The value of entry e in a kernel: `tab` is the shared copy for U8, the
 * global table for U16, unused otherwise; c the CONST value. */
template <typename T, int VM>
__device__ __forceinline__ T pk_value(const void *__restrict__ data, const T *tab, T c, int64_t e)
{
    if constexpr (VM == SPMV_VCODE_RAW)
        return __ldcs((const T *)data + e);
    else if constexpr (VM == SPMV_VCODE_CONST)
        return c;
    else if constexpr (VM == SPMV_VCODE_F32)
        return (T)__ldcs((const float *)data + e);
    else if constexpr (VM == SPMV_VCODE_U8)
        return tab[__ldcs((const unsigned char *)data + e)];
    else
        return __ldg(tab + __ldcs((const unsigned short *)data + e));
}

/* Loads the U8 table into shared memory (every thread of the block calls). */
template <typename T, int VM> __device__ __forceinline__ const T *pk_table(const T *table, int32_t ntable, T *shared)
{
    if constexpr (VM != SPMV_VCODE_U8) {
        return table;
    } else {
        for (int i = threadIdx.x; i < ntable; i += blockDim.x)
            shared[i] = table[i];
        __syncthreads();
        return shared;
    }
}

/* The packed kernels' dispatch: L<T, VM>::launch(l) for the matrix's dtype
 * and the format's value mode. */
template <template <typename, int> class L> static int pk_run(struct gpu_launch *l, spmv_vcode mode, const char *name,
                                                              spmv_error *err)
{
    if (l->m->rows == 0)
        return SPMV_OK;
    bool f64 = l->m->dtype == SPMV_FLOAT64;
    switch (mode) {
    case SPMV_VCODE_CONST: f64 ? L<double, SPMV_VCODE_CONST>::launch(l) : L<float, SPMV_VCODE_CONST>::launch(l); break;
    case SPMV_VCODE_U8: f64 ? L<double, SPMV_VCODE_U8>::launch(l) : L<float, SPMV_VCODE_U8>::launch(l); break;
    case SPMV_VCODE_U16: f64 ? L<double, SPMV_VCODE_U16>::launch(l) : L<float, SPMV_VCODE_U16>::launch(l); break;
    case SPMV_VCODE_F32: f64 ? L<double, SPMV_VCODE_F32>::launch(l) : L<float, SPMV_VCODE_F32>::launch(l); break;
    default: f64 ? L<double, SPMV_VCODE_RAW>::launch(l) : L<float, SPMV_VCODE_RAW>::launch(l); break;
    }
    return gpu_check_launch(err, name);
}

#endif /* SPMV_GPU_PACKED_CUH */
