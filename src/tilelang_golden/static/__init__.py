"""The static path: variant -> lowering -> facts and normalized CUDA -> snapshot compare or write."""
