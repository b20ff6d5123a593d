/* SPDX-License-Identifier: MIT */
/*
 * Real dmabufs for tests, from vgem: the kernel's virtual GEM driver, a
 * real dmabuf exporter with no device behind it (/dev/dri/card0), which
 * the RDMA lab VM loads (tests/rdma/vmlab.sh). Here, in one header, so
 * that the tests registering dmabufs through xport's API
 * (rdma/test_rdma_dmabuf.c) and through the NCCL plugin's regMrDmaBuf
 * (nccl/, mode dmabuf) make them the same way. Static inline and free of
 * either test's assertion macros: each caller fails in its own way.
 */
#ifndef XP_TESTS_VGEM_H
#define XP_TESTS_VGEM_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* DRM's ioctls for a dumb buffer and its export as a dmabuf (uapi
 * drm.h and drm_mode.h, which Debian ships only with libdrm-dev): our
 * names, DRM's layouts, so that no libdrm header is needed or clashes. */
struct vgem_create_dumb {
	uint32_t height, width, bpp, flags, handle, pitch;
	uint64_t size;
};
struct vgem_prime_handle {
	uint32_t handle, flags;
	int32_t fd;
};
#define VGEM_IOCTL_CREATE_DUMB _IOWR('d', 0xB2, struct vgem_create_dumb)
#define VGEM_IOCTL_HANDLE_TO_FD _IOWR('d', 0x2d, struct vgem_prime_handle)

struct vgem_dmabuf {
	int fd;
	uint8_t *map;
	size_t len;
};

/* Whether this host has vgem: the module loaded and its card ours to
 * use. Outside the lab VM it has not. */
static inline bool vgem_present(void)
{
	return access("/sys/module/vgem", F_OK) == 0 && access("/dev/dri/card0", R_OK | W_OK) == 0;
}

/*
 * A vgem buffer of @len bytes (a multiple of 4096: rows of 4096 bytes),
 * exported as a dmabuf and mapped whole into *@b. 0, or -errno with
 * *@step saying which step failed and nothing left open. The DRM fd is
 * closed: the dmabuf lives on through its own fd.
 */
static inline int vgem_dmabuf_new(size_t len, struct vgem_dmabuf *b, const char **step)
{
	*step = "open /dev/dri/card0";
	int card = open("/dev/dri/card0", O_RDWR | O_CLOEXEC);
	if (card < 0)
		return -errno;
	*step = "vgem: creating a buffer";
	struct vgem_create_dumb c = { .height = (uint32_t)(len / 4096), .width = 1024, .bpp = 32 };
	if (len % 4096 != 0 || len / 4096 > UINT32_MAX) {
		close(card);
		return -EINVAL;
	}
	if (ioctl(card, VGEM_IOCTL_CREATE_DUMB, &c) != 0) {
		int rc = -errno;
		close(card);
		return rc;
	}
	if (c.size < len) { /* made, but smaller than asked: freed with the card */
		close(card);
		return -ENOSPC;
	}
	*step = "vgem: exporting the buffer";
	struct vgem_prime_handle p = { .handle = c.handle, .flags = O_RDWR | O_CLOEXEC };
	if (ioctl(card, VGEM_IOCTL_HANDLE_TO_FD, &p) != 0) {
		int rc = -errno;
		close(card); /* frees the buffer: nothing else holds it */
		return rc;
	}
	close(card);
	*step = "mapping the dmabuf";
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, 0);
	if (m == MAP_FAILED) {
		int rc = -errno;
		close(p.fd);
		return rc;
	}
	*b = (struct vgem_dmabuf){ .fd = p.fd, .map = m, .len = len };
	return 0;
}

#endif
