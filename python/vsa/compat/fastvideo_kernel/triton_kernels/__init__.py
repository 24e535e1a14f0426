"""fastvideo_kernel.triton_kernels: of FastVideo's Triton kernels, only the block-list helpers of
`index` are provided (on vsa's metadata ops); importing any other module here raises
ModuleNotFoundError, which FastVideo code treats as an absent optional backend."""
