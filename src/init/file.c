/* FILE streams: write (a temp file renamed into place), read, list, delete
 * and mkdir. Data moves in frames as it is sent or credited, so a file of any
 * size costs a frame's worth of memory. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
#include "init.h"

/* FILE read: one read() per frame, within credit. */
void read_service(struct xfer *x)
{
	struct conn *c = x->conn;

	while (!x->done && !c->dead && !c->congested && x->credit > 0) {
		size_t max = x->credit < READ_CHUNK ? (size_t)x->credit : READ_CHUNK;
		ssize_t n;

		if (buf_reserve(&c->out, SBX_FRAME_HDR + max) < 0) {
			conn_kill(c, "out of memory");
			return;
		}
		n = read(x->fd, c->out.p + c->out.len + SBX_FRAME_HDR, max);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			xfer_fail(x, errno);
			return;
		}
		if (n == 0) {
			xfer_end(x, 0, 0, 0);
			return;
		}
		sbx_frame_header(c->out.p + c->out.len, SBX_F_STDOUT, x->stream, (uint32_t)n);
		c->out.len += SBX_FRAME_HDR + (size_t)n;
		x->credit -= (uint64_t)n;
		conn_flush(c);
		note_congestion(c);
	}
	/* credit used up exactly at the end: EXIT without waiting for more */
	if (!x->done && x->credit == 0) {
		struct stat st;
		off_t pos = lseek(x->fd, 0, SEEK_CUR);
		if (pos >= 0 && fstat(x->fd, &st) == 0 && pos >= st.st_size)
			xfer_end(x, 0, 0, 0);
	}
}

/* FILE list: one entry per frame; a line is sent whole while any credit
 * is left (it may overdraw by one line). */
void list_service(struct xfer *x)
{
	struct conn *c = x->conn;
	char line[SBX_LIST_LINE_MAX];

	while (!x->done && !c->dead && !c->congested && x->credit > 0) {
		struct sbx_list_entry e;
		struct dirent *d;
		struct stat st;
		long n;

		errno = 0;
		d = readdir(x->dir);
		if (!d) {
			if (errno)
				xfer_fail(x, errno);
			else
				xfer_end(x, 0, 0, 0);
			return;
		}
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		/* gone since readdir: not listed */
		if (fstatat(dirfd(x->dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		e.type = S_ISREG(st.st_mode)   ? SBX_FT_FILE
			 : S_ISDIR(st.st_mode) ? SBX_FT_DIR
			 : S_ISLNK(st.st_mode) ? SBX_FT_SYMLINK
					       : SBX_FT_OTHER;
		e.size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
		e.mode = st.st_mode & 07777;
		e.mtime = (int64_t)st.st_mtim.tv_sec;
		e.name = d->d_name;
		e.name_len = strlen(d->d_name);
		n = sbx_list_entry_encode(&e, line, sizeof(line));
		if (n < 0)
			continue; /* a name with '\n' cannot be a line */
		conn_send(c, SBX_F_STDOUT, x->stream, line, (size_t)n);
		x->credit = x->credit > (uint64_t)n ? x->credit - (uint64_t)n : 0;
		note_congestion(c);
	}
}

/* mkdir -p; the last component gets `mode`. */
int mkdir_p(const char *path, mode_t mode)
{
	char buf[SBX_PATH_MAX + 1];
	size_t n = strlen(path);
	struct stat st;

	if (n > SBX_PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		char save = buf[i];
		if (save != '/' && save != 0)
			continue;
		if (buf[i - 1] == '/')
			continue; /* "//" or a trailing '/' */
		buf[i] = 0;
		if (mkdir(buf, i == n ? mode : 0755) < 0) {
			if (errno != EEXIST || stat(buf, &st) < 0)
				return -1;
			if (!S_ISDIR(st.st_mode)) {
				errno = i == n ? EEXIST : ENOTDIR;
				return -1;
			}
		}
		buf[i] = save;
	}
	return 0;
}

/* Write: a temp file next to the target, renamed over it at the end, so
 * readers see the old file or the new one, and a symlink at the target is
 * replaced rather than written through. */
static void file_write(struct conn *c, uint32_t stream, const struct sbx_file_req *req)
{
	const char *slash = strrchr(req->path, '/'), *base = slash + 1;
	size_t dl = slash == req->path ? 1 : (size_t)(slash - req->path);
	char dir[SBX_PATH_MAX + 1], *tmp;
	struct stat st;
	struct xfer *x;
	int fd;

	if (!*base) {
		answer(c, stream, EISDIR);
		return;
	}
	if (!strcmp(base, ".") || !strcmp(base, "..")) {
		answer(c, stream, EINVAL);
		return;
	}
	memcpy(dir, req->path, dl);
	dir[dl] = 0;
	if ((req->flags & SBX_FILE_PARENTS) && mkdir_p(dir, 0755) < 0) {
		answer(c, stream, errno);
		return;
	}
	if (lstat(req->path, &st) == 0 && S_ISDIR(st.st_mode)) {
		answer(c, stream, EISDIR);
		return;
	}
	tmp = malloc(dl + 32);
	if (!tmp) {
		answer(c, stream, ENOMEM);
		return;
	}
	snprintf(tmp, dl + 32, "%s/.sbx-upload-XXXXXX", dl == 1 ? "" : dir);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		free(tmp);
		answer(c, stream, e);
		return;
	}
	x = xfer_new(c, stream, X_WRITE);
	if (!x) {
		close(fd);
		unlink(tmp);
		free(tmp);
		return;
	}
	x->fd = fd;
	x->tmp = tmp;
	x->path = strdup(req->path);
	x->mode = req->mode ? req->mode : 0644;
	if (!x->path)
		xfer_fail(x, ENOMEM);
}

/* Write data: written at once (a regular file), so nothing is buffered;
 * acknowledged like exec stdin. Empty: the end, rename into place. */
void file_write_data(struct xfer *x, const uint8_t *data, size_t len)
{
	size_t off = 0;

	if (len == 0) {
		int fd = x->fd;
		x->fd = -1;
		if (fchmod(fd, x->mode) < 0) {
			int e = errno;
			close(fd);
			xfer_fail(x, e);
			return;
		}
		if (close(fd) < 0 || rename(x->tmp, x->path) < 0) {
			xfer_fail(x, errno);
			return;
		}
		free(x->tmp);
		x->tmp = NULL;
		xfer_end(x, 0, 0, 0);
		return;
	}
	while (off < len) {
		ssize_t w = write(x->fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			xfer_fail(x, w < 0 ? errno : EIO);
			return;
		}
		off += (size_t)w;
	}
	conn_send_u32(x->conn, SBX_F_STDIN_ACK, x->stream, (uint32_t)len);
}

static void file_read(struct conn *c, uint32_t stream, const struct sbx_file_req *req)
{
	struct sbx_file_stat fs;
	uint8_t b[SBX_STAT_LEN];
	struct stat st;
	struct xfer *x;
	int fd;

	/* O_NONBLOCK: a FIFO must not block the loop in open() */
	fd = open(req->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		answer(c, stream, errno);
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = EIO;
		if (fstat(fd, &st) == 0)
			e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		close(fd);
		answer(c, stream, e);
		return;
	}
	x = xfer_new(c, stream, X_READ);
	if (!x) {
		close(fd);
		return;
	}
	x->fd = fd;
	x->credit = req->credit;
	fs.size = (uint64_t)st.st_size;
	fs.mode = st.st_mode & 07777;
	fs.mtime = (int64_t)st.st_mtim.tv_sec;
	sbx_stat_encode(&fs, b);
	conn_send(c, SBX_F_STAT, stream, b, sizeof(b));
	read_service(x);
}

static void file_list(struct conn *c, uint32_t stream, const struct sbx_file_req *req)
{
	struct xfer *x;
	DIR *d;
	int fd;

	fd = open(req->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		answer(c, stream, e);
		return;
	}
	x = xfer_new(c, stream, X_LIST);
	if (!x) {
		closedir(d);
		return;
	}
	x->dir = d;
	x->credit = req->credit;
	list_service(x);
}

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if ((type == FTW_DP || type == FTW_DNR ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
		return errno_code(errno);
	return 0;
}

static int file_delete(const struct sbx_file_req *req)
{
	struct stat st;
	int r;

	if (strspn(req->path, "/") == strlen(req->path))
		return EBUSY; /* the sandbox's root */
	if (lstat(req->path, &st) < 0)
		return errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(req->path) < 0 ? errno : 0;
	if (!(req->flags & SBX_FILE_PARENTS))
		return rmdir(req->path) < 0 ? errno : 0;
	/* depth first, symlinks removed not followed, other mounts left alone
	 * (their mount points then stay: EBUSY) */
	r = nftw(req->path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	return r < 0 ? errno : r;
}

void on_file(struct conn *c, uint32_t stream, const struct sbx_file_req *req)
{
	mode_t mode = req->mode ? req->mode : 0755;

	switch (req->op) {
	case SBX_FILE_WRITE:
		file_write(c, stream, req);
		break;
	case SBX_FILE_READ:
		file_read(c, stream, req);
		break;
	case SBX_FILE_LIST:
		file_list(c, stream, req);
		break;
	case SBX_FILE_DELETE:
		answer(c, stream, file_delete(req));
		break;
	case SBX_FILE_MKDIR:
		if (req->flags & SBX_FILE_PARENTS)
			answer(c, stream, mkdir_p(req->path, mode) < 0 ? errno : 0);
		else
			answer(c, stream, mkdir(req->path, mode) < 0 ? errno : 0);
		break;
	}
}
