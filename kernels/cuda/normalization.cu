// Device code of the normalization ops (softmax, losses, layer and batch norm, embedding).
