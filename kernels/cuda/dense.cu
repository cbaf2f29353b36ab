// Device code of the dense ops (matmul, bmm, linear (cuBLAS); conv2d (cuDNN); pooling).
