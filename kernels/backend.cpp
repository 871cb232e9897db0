// Backend factory: the CPU backend is linked in; the CUDA backend lives in
// libkvscope_cuda.so, loaded with dlopen() only when asked for, so the program starts
// (and says why CUDA is not used) on machines without NVIDIA drivers or GPUs.
#include <dlfcn.h>
#include <unistd.h>

#include <sys/stat.h>
#include <array>
#include <climits>
#include <mutex>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"

namespace kvs {
namespace {

constexpr const char* kCudaLibrary = "libkvscope_cuda.so";
constexpr const char* kCudaEntry = "kvscope_create_cuda_backend";
using CreateCudaBackendFn = Backend* (*)(char* err, size_t err_len);
constexpr const char* kCudaMemoryEntry = "kvscope_cuda_device_memory";
using CudaMemoryFn = int (*)(int64_t* free_bytes, int64_t* total_bytes, char* text, size_t text_len);
void* g_cuda_lib = nullptr;  // the loaded libkvscope_cuda.so (load_cuda_entry), never closed

// Directory of the running executable ("" when /proc is unavailable).
std::string exe_dir() {
    std::array<char, PATH_MAX> buf{};
    const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
    if (n <= 0) return {};
    std::string path(buf.data(), static_cast<size_t>(n));
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

bool is_file(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The library next to the executable's tree: <exe dir>/../lib (the build tree puts
// programs in build/bin, tests in build/tests, libraries in build/lib; an install puts
// them in prefix/bin and prefix/lib), else "" (then the loader's search path is used,
// which includes the executable's RUNPATH, e.g. prefix/lib/x86_64-linux-gnu).
std::string find_cuda_library(std::string* looked_in) {
    const std::string dir = exe_dir();
    if (dir.empty()) return {};
    *looked_in = dir + "/../lib";
    for (const char* sub : {"/../lib/", "/../lib64/"}) {
        const std::string path = dir + sub + kCudaLibrary;
        if (is_file(path)) return path;
    }
    return {};
}

bool nvidia_driver_present() {
    // The CUDA runtime opens the driver itself; this only tells "no driver" apart from
    // other failures. The handle is kept: the runtime will use the library anyway.
    return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
}

// The library's factory, loaded once per process (and never unloaded: backends it
// creates run its code until the process exits). nullptr and *why when unavailable.
CreateCudaBackendFn load_cuda_entry(std::string* why) {
    static std::mutex mutex;
    static bool tried = false;
    static CreateCudaBackendFn fn = nullptr;
    static std::string fail;
    std::lock_guard<std::mutex> lock(mutex);
    if (!tried) {
        tried = true;
        std::string looked_in;
        const std::string found = find_cuda_library(&looked_in);
        const std::string path = found.empty() ? kCudaLibrary : found;
        void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char* e = dlerror();
            const std::string err = e ? e : "unknown dlopen error";
            if (found.empty() && err.rfind(kCudaLibrary, 0) == 0) {
                fail = std::string("CUDA backend not built or installed (no ") + kCudaLibrary + " in " +
                       (looked_in.empty() ? std::string("the executable's directory") : looked_in) +
                       " or on the library search path)";
            } else if (!nvidia_driver_present()) {
                fail = "no NVIDIA driver (libcuda.so.1 not found)";
            } else {
                fail = "cannot load " + path + ": " + err;
            }
        } else if (g_cuda_lib = lib; !(fn = reinterpret_cast<CreateCudaBackendFn>(dlsym(lib, kCudaEntry)))) {
            fail = path + " has no " + kCudaEntry + " (a library from another KV Scope version?)";
        } else if (!nvidia_driver_present()) {
            fn = nullptr;
            fail = "no NVIDIA driver (libcuda.so.1 not found)";
        }
    }
    if (!fn && why) *why = fail;
    return fn;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::string* why) {
    std::string reason;
    const CreateCudaBackendFn create = load_cuda_entry(&reason);
    if (create) {
        std::array<char, 1024> err{};
        if (Backend* b = create(err.data(), err.size())) return std::unique_ptr<Backend>(b);
        reason = err[0] ? std::string(err.data()) : std::string("the CUDA backend did not start (no reason given)");
    }
    if (why) *why = reason;
    return nullptr;
}

DeviceMemory cuda_device_memory() {
    DeviceMemory m;
    if (!load_cuda_entry(&m.why)) return m;
    const auto fn = reinterpret_cast<CudaMemoryFn>(dlsym(g_cuda_lib, kCudaMemoryEntry));
    if (!fn) {
        m.why =
            std::string(kCudaLibrary) + " has no " + kCudaMemoryEntry + " (a library from another KV Scope version?)";
        return m;
    }
    std::array<char, 512> text{};
    if (fn(&m.free_bytes, &m.total_bytes, text.data(), text.size()) != 0) {
        m.why = text[0] ? std::string(text.data()) : std::string("the CUDA device did not answer");
        return m;
    }
    m.device = text.data();
    m.ok = true;
    return m;
}

std::unique_ptr<Backend> make_backend(const std::string& requested, int n_threads, std::string* note,
                                      const std::string& simd) {
    std::string text;
    std::unique_ptr<Backend> backend;
    if (requested != "auto" && requested != "cpu" && requested != "cuda") {
        text = "unknown backend '" + requested + "': expected auto, cpu or cuda";
    } else if (std::string err; !cpu::parse_simd(simd, &err)) {
        text = err;  // checked even when CUDA would be used: the request is wrong either way
    } else {
        std::string why;
        if (requested != "cpu") backend = make_cuda_backend(&why);
        if (backend) {
            text = "backend: " + backend->name();
        } else {
            backend = make_cpu_backend(n_threads, simd);
            const int n = backend->n_threads();
            text = "backend: " + backend->name() + " (" + std::to_string(n) + (n == 1 ? " thread)" : " threads)");
            if (requested == "auto") text += "; CUDA not used: " + why;
            if (requested == "cuda") text += "; CUDA requested but not available: " + why;
        }
    }
    if (note) *note = text;
    return backend;
}

}  // namespace kvs
