/* A libcurl.so.4 with one of the functions bitflip needs: cli_test_cli puts
 * its folder first on LD_LIBRARY_PATH, so that `bitflip run --server` loads it
 * and must say which function is missing and what to install, and exit 3. */
int curl_global_init(long flags);

int curl_global_init(long flags)
{
    (void)flags;
    return 0;
}
