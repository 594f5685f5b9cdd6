/* Growing arrays by doubling (grow.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "grow.h"

int grow(void **v, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t ncap = *cap ? *cap : (first ? first : 1);
	void *nv;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -EOVERFLOW;
		ncap *= 2;
	}
	if (elem && ncap > SIZE_MAX / elem)
		return -EOVERFLOW;
	nv = realloc(*v, ncap * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}
