"""Everything that touches a device: GpuBackend and its models, KV cache, buffers, sampler,
weights. Business logic above this package reaches the GPU only through these interfaces."""
