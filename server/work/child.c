/* The daemon's children are its own binary run again (/proc/self/exe) in a
 * hidden mode; this tells those argv from a daemon's and runs the mode. */
#include <string.h>

#include "work/check.h"
#include "work/worker.h"

int bfd_child_main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--worker")) return bfd_worker_main(argc, argv);
    if (argc >= 3 && (!strcmp(argv[1], "--check-model") || !strcmp(argv[1], "--check-dataset") ||
                      !strcmp(argv[1], "--check-errmap") || !strcmp(argv[1], "--check-campaign") ||
                      !strcmp(argv[1], "--picture")))
        return bfd_check_main(argc, argv);
    return -1;
}
