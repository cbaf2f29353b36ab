// Device code of the elementwise ops (elementwise, reductions, broadcast, random, optimizers).
