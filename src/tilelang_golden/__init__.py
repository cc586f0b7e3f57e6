"""The golden-file harness: variant -> lowering -> facts / normalized CUDA -> snapshot compare or write."""
