#include "smallfile.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int small_file_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		r = -errno;
	else
		buf[n] = '\0';
	close(fd);
	return r;
}
