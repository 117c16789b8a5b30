/*
 * sim_demo_device.h — the demo's CUDA side (--device cuda): device buffers for the producers'
 * tensors, their upload on a producer stream, and a consumer's download of a device group after
 * its ready event. Built with the CUDA runtime where the library has its CUDA backend
 * (OVSTAGE_DEMO_CUDA); elsewhere every call reports that the mode is unavailable.
 *
 * Thread safety: every function may be called from any thread; a stream belongs to one thread.
 */
#ifndef SIM_DEMO_DEVICE_H
#define SIM_DEMO_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether --device cuda can run here; false with the reason in why (no backend built in, no GPU). */
bool demo_cuda_usable(char *why, size_t len);
/* Device memory of `bytes` on device 0, or NULL. */
void *demo_cuda_alloc(size_t bytes);
void demo_cuda_free(void *p);
/* A non-blocking stream (the producer's or the consumer's), or NULL. */
void *demo_cuda_stream(void);
void demo_cuda_stream_destroy(void *s);
/* Enqueues a host-to-device copy on stream s (the host buffer may be reused when it returns). */
bool demo_cuda_upload(void *dst, const void *src, size_t bytes, void *s);
/* Copies a device group's bytes to the host on stream s after its ready event, and waits. */
bool demo_cuda_download(void *dst, const void *src, size_t bytes, uintptr_t ready_event, void *s);

#endif /* SIM_DEMO_DEVICE_H */
