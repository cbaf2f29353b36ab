// Device code of the layout ops (reshape, slice, split, concat, transpose, permute).
