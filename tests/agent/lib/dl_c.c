/* dl_c.c — a library that is only loaded and unloaded (detail_dl.c). */
int dl_c_fn(void);
int dl_c_fn(void)
{
    return 1;
}
