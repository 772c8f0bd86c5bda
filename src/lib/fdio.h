/* Whole writes to a descriptor. */
#ifndef SBX_FDIO_H
#define SBX_FDIO_H

#include <stddef.h>

/* All of P's N bytes to FD, however the kernel cuts them (a pipe or a
 * terminal may take them in pieces; EINTR is retried): 0, or -1 with errno
 * (a write that wrote nothing is EIO). */
int sbx_write_all(int fd, const void *p, size_t n);

#endif
