/* jitprobe.c — the CUDA PTX JIT, alone, for tests/e2e/systemd_gpu.sh.
 *
 * A GPU newer than the build's machine code runs the embedded PTX, which
 * the driver JIT-compiles at load time; whether that needs writable and
 * executable memory decides whether spmvd.service could set
 * MemoryDenyWriteExecute=. This program JIT-compiles a one-line kernel from
 * PTX text with the driver API (cuModuleLoadDataEx), runs it, checks what it
 * wrote, and prints how many rwx mappings the process holds. With "mdwe" as
 * its argument it first sets PR_SET_MDWE (the kernel's form of
 * MemoryDenyWriteExecute=yes). Exit status 0 when the kernel ran.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry k(.param .u64 p)\n{\n .reg .u64 %rd<3>;\n .reg .u32 %r<2>;\n"
    " ld.param.u64 %rd1, [p];\n cvta.to.global.u64 %rd2, %rd1;\n mov.u32 %r1, 42;\n"
    " st.global.u32 [%rd2], %r1;\n ret;\n}\n";

static int rwx(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        char perm[8];
        if (sscanf(line, "%*s %7s", perm) == 1 && strncmp(perm, "rwx", 3) == 0)
            n++;
    }
    if (f) fclose(f);
    return n;
}

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_ = ""; cuGetErrorString(r_, &s_); \
    printf("%s: %s -> %d %s (rwx maps %d)\n", mode, #x, (int)r_, s_, rwx()); return 1; } } while (0)

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    if (strcmp(mode, "mdwe") == 0 && prctl(65 /* PR_SET_MDWE */, 1, 0, 0, 0) != 0) {
        perror("PR_SET_MDWE");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr p;
    unsigned v = 0;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadDataEx(&mod, ptx, 0, NULL, NULL));
    CK(cuModuleGetFunction(&fn, mod, "k"));
    CK(cuMemAlloc(&p, 4));
    void *args[] = {&p};
    CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuMemcpyDtoH(&v, p, 4));
    printf("%s: PTX JIT-compiled and ran, wrote %u; %d rwx mapping(s)\n", mode, v, rwx());
    return v == 42 ? 0 : 1;
}
