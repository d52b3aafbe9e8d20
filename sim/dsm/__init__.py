"""DeepSpatialMatrix: mapping DNN training onto peta-scale accelerator systems."""
