# The cuda-runtime image's workload on a GPU host (scripts/gpu-libraries.sh passes it as the
# image's `python3 -c` argument): with the image's own libcudart (ctypes, by its path in the
# image) count the devices and copy a buffer to the GPU and back; with the image's own NVRTC
# compile a kernel to PTX, which the driver (libcuda, injected by the runtime) JIT-compiles,
# loads and runs; verify every element. Prints one line per step; exits 1 on any failure.
import ctypes, glob, sys

SITE = "/usr/local/lib/python3.11/dist-packages/nvidia"
RTLD_GLOBAL = ctypes.RTLD_GLOBAL


def one(pattern):
    found = sorted(glob.glob(SITE + pattern))
    if not found:
        sys.exit("workload: nothing matches " + pattern)
    return found[0]


def ok(code, what, lib=None):
    if code != 0:
        name = ""
        if lib is not None and hasattr(lib, "cudaGetErrorName"):
            lib.cudaGetErrorName.restype = ctypes.c_char_p
            name = lib.cudaGetErrorName(code).decode()
        sys.exit("workload: %s failed: %d %s" % (what, code, name))


cudart_path = one("/cuda_runtime/lib/libcudart.so.*")
cudart = ctypes.CDLL(cudart_path)
v = ctypes.c_int()
ok(cudart.cudaRuntimeGetVersion(ctypes.byref(v)), "cudaRuntimeGetVersion")
n = ctypes.c_int()
ok(cudart.cudaGetDeviceCount(ctypes.byref(n)), "cudaGetDeviceCount", cudart)
print("workload: %s: runtime %d, %d device(s)" % (cudart_path, v.value, n.value))

# A buffer there and back.
N = 1 << 24
src = (ctypes.c_ubyte * N)()
for i in range(0, N, 4096):
    src[i] = (i // 4096) % 251
dst = (ctypes.c_ubyte * N)()
dev = ctypes.c_void_p()
ok(cudart.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(N)), "cudaMalloc", cudart)
ok(cudart.cudaMemcpy(dev, src, ctypes.c_size_t(N), 1), "cudaMemcpy H2D", cudart)
ok(cudart.cudaMemcpy(dst, dev, ctypes.c_size_t(N), 2), "cudaMemcpy D2H", cudart)
ok(cudart.cudaFree(dev), "cudaFree", cudart)
same = bytes(src) == bytes(dst)
print("workload: copied %d bytes to the GPU and back: %s" % (N, "identical" if same else "DIFFERENT"))
if not same:
    sys.exit(1)

# NVRTC: compile to PTX; the driver JIT-compiles and runs it.
ctypes.CDLL(one("/cuda_nvrtc/lib/libnvrtc-builtins.so.*"), mode=RTLD_GLOBAL)
nvrtc_path = one("/cuda_nvrtc/lib/libnvrtc.so.*")
nvrtc = ctypes.CDLL(nvrtc_path)
src_kernel = b"""
extern "C" __global__ void axpb(const float* x, float* y, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
prog = ctypes.c_void_p()
ok(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src_kernel, b"axpb.cu", 0, None, None), "nvrtcCreateProgram")
opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_90")
rc = nvrtc.nvrtcCompileProgram(prog, 1, opts)
if rc != 0:
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    sys.exit("workload: nvrtcCompileProgram failed %d: %s" % (rc, log.value.decode(errors="replace")))
size = ctypes.c_size_t()
ok(nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
ptx = ctypes.create_string_buffer(size.value)
ok(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
maj, mnr = ctypes.c_int(), ctypes.c_int()
nvrtc.nvrtcVersion(ctypes.byref(maj), ctypes.byref(mnr))
print("workload: %s (NVRTC %d.%d) compiled a kernel to %d bytes of PTX" % (nvrtc_path, maj.value, mnr.value, size.value))

cuda = ctypes.CDLL("libcuda.so.1")
ok(cuda.cuInit(0), "cuInit")
devh, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
ok(cuda.cuDeviceGet(ctypes.byref(devh), 0), "cuDeviceGet")
ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), devh), "cuDevicePrimaryCtxRetain")
ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
ok(cuda.cuModuleLoadData(ctypes.byref(mod), ptx), "cuModuleLoadData (driver JIT of NVRTC's PTX)")
ok(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"axpb"), "cuModuleGetFunction")
K = 1 << 20
xs = (ctypes.c_float * K)(*[float(i % 1000) for i in range(K)])
ys = (ctypes.c_float * K)()
dx, dy = ctypes.c_uint64(), ctypes.c_uint64()
ok(cuda.cuMemAlloc_v2(ctypes.byref(dx), ctypes.c_size_t(4 * K)), "cuMemAlloc")
ok(cuda.cuMemAlloc_v2(ctypes.byref(dy), ctypes.c_size_t(4 * K)), "cuMemAlloc")
ok(cuda.cuMemcpyHtoD_v2(dx, xs, ctypes.c_size_t(4 * K)), "cuMemcpyHtoD")
a, b, n_ = ctypes.c_float(2.0), ctypes.c_float(1.0), ctypes.c_int(K)
args = (ctypes.c_void_p * 5)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in (dx, dy, a, b, n_)])
ok(cuda.cuLaunchKernel(fn, K // 256, 1, 1, 256, 1, 1, 0, None, args, None), "cuLaunchKernel")
ok(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
ok(cuda.cuMemcpyDtoH_v2(ys, dy, ctypes.c_size_t(4 * K)), "cuMemcpyDtoH")
bad = [i for i in range(K) if ys[i] != 2.0 * xs[i] + 1.0]
print("workload: the driver ran NVRTC's kernel: %d of %d elements verified" % (K - len(bad), K))
sys.exit(1 if bad else 0)
