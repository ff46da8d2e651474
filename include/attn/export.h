/* Symbol visibility. libattn is built with -fvisibility=hidden and
 * ATTN_BUILDING defined: ATTN_API exports its public functions. For a
 * consumer ATTN_API is a plain declaration (on Windows an import from the
 * DLL unless ATTN_STATIC). ATTN_EXPORT marks what a plugin or backend module
 * defines for libattn to find (attn_plugin_abi, attn_plugin_init, backend
 * objects named by "module.so:symbol"): it is exported whoever builds it. */
#ifndef ATTN_EXPORT_H
#define ATTN_EXPORT_H

#if defined(_WIN32)
#define ATTN_EXPORT __declspec(dllexport)
#else
#define ATTN_EXPORT __attribute__((visibility("default")))
#endif

#if defined(ATTN_BUILDING)
#define ATTN_API ATTN_EXPORT
#elif defined(_WIN32) && !defined(ATTN_STATIC)
#define ATTN_API __declspec(dllimport)
#else
#define ATTN_API
#endif

#if defined(__GNUC__)
#define ATTN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define ATTN_PRINTF(fmt, args)
#endif

#ifdef __cplusplus
#define ATTN_EXTERN_C_BEGIN extern "C" {
#define ATTN_EXTERN_C_END   }
#else
#define ATTN_EXTERN_C_BEGIN
#define ATTN_EXTERN_C_END
#endif

#endif
