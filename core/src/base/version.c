/* bf_version (bitflip/version.h): the number the library was built with,
 * compiled in here rather than read from the caller's headers. */
#include "bitflip/version.h"

const char *bf_version(void) { return BITFLIP_VERSION; }
