// CudaBackend: memory on the GPU, each op one kernel launch (cuda_kernels.h), and
// matmul of more than one token through cuBLAS with fp16 inputs and fp32 compute.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_kernels.h"

namespace kvs::cuda {
namespace {

// fp16 weight elements dequantized per cuBLAS call (32 MiB of scratch); larger
// matrices are multiplied in chunks of rows.
constexpr int64_t kMaxChunkElems = int64_t{1} << 24;

[[noreturn]] void fatal(const std::string& message) {
    std::fprintf(stderr, "kvscope CUDA backend: %s\n", message.c_str());
    std::fflush(stderr);
    std::abort();
}

void check_cublas(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) fatal(std::string(what) + ": " + cublasGetStatusString(s));
}

void check_launch(const char* op) { check_cuda(cudaGetLastError(), op); }

}  // namespace

void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fatal(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// ---------------------------------------------------------------- DeviceScratch

DeviceScratch::~DeviceScratch() {
    if (m_ptr) cudaFree(m_ptr);  // errors ignored: the process may be exiting
}

void* DeviceScratch::get(size_t bytes) {
    if (bytes <= m_bytes) return m_ptr;
    if (m_ptr) check_cuda(cudaFree(m_ptr), "freeing matmul scratch");  // waits for kernels using it
    m_ptr = nullptr;
    m_bytes = 0;
    const size_t want = std::max<size_t>(bytes, 1 << 20);
    const cudaError_t e = cudaMalloc(&m_ptr, want);
    if (e != cudaSuccess)
        fatal("out of GPU memory for " + std::to_string(want >> 20) + " MiB of matmul scratch (" +
              cudaGetErrorString(e) + ")");
    m_bytes = want;
    return m_ptr;
}

// ---------------------------------------------------------------- CudaBackend

CudaBackend::CudaBackend(int device, std::string name, cublasHandle_t cublas)
    : m_device(device), m_name(std::move(name)), m_cublas(cublas) {
    check_cuda(cudaSetDevice(m_device), "cudaSetDevice");
    check_cublas(cublasSetStream(m_cublas, m_stream), "cublasSetStream");
    // fp32 GEMMs stay fp32 (no TF32), like the CPU reference.
    check_cublas(cublasSetMathMode(m_cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
}

CudaBackend::~CudaBackend() {
    cudaDeviceSynchronize();
    cublasDestroy(m_cublas);
}

void* CudaBackend::alloc(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 256)) != cudaSuccess) {
        cudaGetLastError();  // out of memory is not sticky: clear it, report nullptr like malloc
        return nullptr;
    }
    return p;
}

void CudaBackend::release(void* ptr) {
    if (!ptr) return;
    const cudaError_t e = cudaFree(ptr);
    if (e != cudaErrorCudartUnloading) check_cuda(e, "cudaFree");  // at exit the runtime may be gone first
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
    if (bytes) check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "copy_to_device");
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
    if (bytes) check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "copy_to_host");
}

void CudaBackend::synchronize() { check_cuda(cudaStreamSynchronize(m_stream), "synchronize"); }

bool CudaBackend::supports(DType t) const {
    switch (t) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q8_0:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
        case DType::I4_G128:
        case DType::I4_G64:
        case DType::NF4:
        case DType::FP4:
        case DType::NF4_DQ:
        case DType::I8_ROW:
        case DType::I8_LLM: return true;
        default: return false;
    }
}

void CudaBackend::matmul(const WeightView& w, const float* x, float* y, int n_tokens) {
    if (n_tokens <= 0 || w.n_out <= 0) return;
    if (!supports(w.dtype)) fatal("matmul: no kernels for weight type " + std::string(dtype_name(w.dtype)));
    if (w.in_perm) {  // GPTQ act-order: the stored columns are the input's in in_perm's order
        auto* xp = static_cast<float*>(m_xperm.get(static_cast<size_t>(n_tokens) * w.n_in * sizeof(float)));
        launch_gather_columns(x, w.in_perm, xp, n_tokens, w.n_in, m_stream);
        check_launch("matmul (gather by in_perm)");
        x = xp;
    }
    if (w.dtype == DType::I8_LLM) {  // activations quantized per token: its own kernel for every count
        launch_llm_int8(w, x, y, n_tokens, m_stream);
        check_launch("matmul (LLM.int8())");
        return;
    }
    if (n_tokens == 1) {
        launch_gemv(w, x, y, m_stream);
        check_launch("matmul (gemv)");
        return;
    }
    matmul_gemm(w, x, y, n_tokens);
}

// Row-major y [n_tokens, n_out] = x [n_tokens, n_in] * W^T, W [n_out, n_in], is, in
// cuBLAS's column-major terms, Y [n_out, n_tokens] = W' [n_in, n_out]^T * X [n_in, n_tokens].
void CudaBackend::matmul_gemm(const WeightView& w, const float* x, float* y, int n_tokens) {
    const int n_in = static_cast<int>(w.n_in), n_out = static_cast<int>(w.n_out);
    const float one = 1.0f, zero = 0.0f;
    if (w.dtype == DType::F32) {
        check_cublas(cublasSgemm(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_tokens, n_in, &one,
                                 static_cast<const float*>(w.data), n_in, x, n_in, &zero, y, n_out),
                     "matmul (cublasSgemm)");
        return;
    }
    auto* x16 = static_cast<uint16_t*>(m_x16.get(static_cast<size_t>(n_tokens) * n_in * 2));  // [n_tokens, n_in]
    launch_f32_to_f16(x, x16, static_cast<int64_t>(n_tokens) * n_in, m_stream);
    check_launch("matmul (x to fp16)");
    const bool is_f16 = w.dtype == DType::F16;
    const int64_t chunk = is_f16 ? n_out : std::max<int64_t>(1, kMaxChunkElems / n_in);  // rows per GEMM
    for (int64_t o0 = 0; o0 < n_out; o0 += chunk) {
        const int m = static_cast<int>(std::min<int64_t>(chunk, n_out - o0));
        const uint16_t* a = nullptr;  // [m, n_in] fp16
        if (is_f16) {
            a = static_cast<const uint16_t*>(w.data) + o0 * n_in;
        } else {
            auto* w16 = static_cast<uint16_t*>(m_w16.get(static_cast<size_t>(m) * n_in * 2));
            launch_dequant_f16(w, o0, m, w16, m_stream);
            check_launch("matmul (dequantize to fp16)");
            a = w16;
        }
        check_cublas(
            cublasGemmEx(m_cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, n_tokens, n_in, &one, a, CUDA_R_16F, n_in, x16,
                         CUDA_R_16F, n_in, &zero, y + o0, CUDA_R_32F, n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "matmul (cublasGemmEx)");
    }
}

void CudaBackend::embedding(const WeightView& table, const int32_t* ids, int n_tokens, float* out) {
    if (!supports(table.dtype)) fatal("embedding: no kernels for type " + std::string(dtype_name(table.dtype)));
    launch_embedding(table, ids, n_tokens, out, m_stream);
    check_launch("embedding");
}

void CudaBackend::rms_norm(const float* x, const float* weight, float* y, int n_rows, int n, float eps) {
    launch_rms_norm(x, weight, y, n_rows, n, eps, m_stream);
    check_launch("rms_norm");
}

void CudaBackend::rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, int n_rot, float freq_base,
                       RopeStyle style) {
    launch_rope(x, pos, n_tokens, n_head, head_dim, n_rot, freq_base, style, m_stream);
    check_launch("rope");
}

void CudaBackend::softmax(float* x, int n_rows, int n_cols) {
    launch_softmax(x, n_rows, n_cols, m_stream);
    check_launch("softmax");
}

void CudaBackend::swiglu(const float* gate, const float* up, float* y, int64_t n) {
    launch_swiglu(gate, up, y, n, m_stream);
    check_launch("swiglu");
}

void CudaBackend::add(const float* a, const float* b, float* y, int64_t n) {
    launch_add(a, b, y, n, m_stream);
    check_launch("add");
}

void CudaBackend::add_bias(const float* x, const float* bias, float* y, int n_rows, int n) {
    launch_add_bias(x, bias, y, n_rows, n, m_stream);
    check_launch("add_bias");
}

// Only F16 K/V caches have kernels here (supports_kv says so); the engine refuses any
// other cache type on this backend before it gets this far.
void CudaBackend::kv_store(const KvStoreArgs& a) {
    if (a.cache_type != DType::F16)
        fatal("kv_store: no kernels for a " + std::string(dtype_name(a.cache_type)) + " K/V cache (F16 only)");
    launch_kv_store(a, m_stream);
    check_launch("kv_store");
}

void CudaBackend::paged_attention(const PagedAttentionArgs& a) {
    if (a.cache_type != DType::F16)
        fatal("paged_attention: no kernels for a " + std::string(dtype_name(a.cache_type)) + " K/V cache (F16 only)");
    if (a.head_dim > kMaxHeadDim || a.head_dim <= 0)
        fatal("paged_attention: head_dim " + std::to_string(a.head_dim) + " is outside 1.." +
              std::to_string(kMaxHeadDim));
    if (a.n_kv_head <= 0 || a.n_head % a.n_kv_head != 0)
        fatal("paged_attention: n_head " + std::to_string(a.n_head) + " is not a multiple of n_kv_head " +
              std::to_string(a.n_kv_head));
    launch_paged_attention(a, m_stream);
    check_launch("paged_attention");
}

}  // namespace kvs::cuda
