"""Model assembly: config -> loader -> layers -> model; the engine loop. No direct I/O:
the GPU through GpuBackend, weight bytes through WeightStore."""
