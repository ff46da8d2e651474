/* The machine-measurement loops (see cpu_machine.h) written once for every
 * vector width. The includer defines, before including:
 *
 *   MI, MF, M_BYTES           the int and fp32 vector types, the vector bytes;
 *   M_ZEROI() M_LOADI(p) M_ADD64(a, b)   int64 lanes (p aligned);
 *   M_SET1(x) M_FMADD(a, b, c) M_ADDF(a, b)   fp32 lanes;
 *   M_PREFETCH(p)             prefetches (T2) the 4 * M_BYTES bytes at p;
 *   M_SUM64(v)                the sum of the int64 lanes, as uint64_t;
 *   M_FRESULT(v)              a double that depends on the fp32 lanes;
 *   M_CHAINS, M_UNROLL        the FMA chains (the same number, as a literal
 *                             for the pragma);
 *   CM_READ, CM_FMA           the names of the two functions. */
#ifndef ATTN_CPU_MACHINE_TMPL_H
#define ATTN_CPU_MACHINE_TMPL_H

#include "backends/cpu/cpu_machine.h"

#define M_PRAGMA(x)  _Pragma(#x)
#define M_UNROLL_(n) M_PRAGMA(GCC unroll n)

uint64_t CM_READ(const void *p, size_t n, size_t pf)
{
    const char *c = p;
    MI a = M_ZEROI(), b = a, d = a, e = a;
    for (size_t i = 0; i < n; i += 4 * M_BYTES) {
        if (pf && i + pf + 4 * M_BYTES <= n) M_PREFETCH(c + i + pf);
        a = M_ADD64(a, M_LOADI(c + i));
        b = M_ADD64(b, M_LOADI(c + i + M_BYTES));
        d = M_ADD64(d, M_LOADI(c + i + 2 * M_BYTES));
        e = M_ADD64(e, M_LOADI(c + i + 3 * M_BYTES));
    }
    return M_SUM64(M_ADD64(M_ADD64(a, b), M_ADD64(d, e)));
}

double CM_FMA(long iters)
{
    /* independent chains, enough to cover the FMA latency on both ports */
    MF x = M_SET1(0.99999994f), y = M_SET1(1e-7f);
    MF a[M_CHAINS];
    for (int k = 0; k < M_CHAINS; k++)
        a[k] = M_SET1(1.0f + (float)k * 1e-3f);
    for (long i = 0; i < iters; i++) {
        M_UNROLL_(M_UNROLL)
        for (int k = 0; k < M_CHAINS; k++)
            a[k] = M_FMADD(a[k], x, y);
    }
    MF s = a[0];
    for (int k = 1; k < M_CHAINS; k++)
        s = M_ADDF(s, a[k]);
    return M_FRESULT(s);
}

#endif
