"""Golden models of the CATERPILLAR family: the LAC core's microprograms, the ring, Goldschmidt."""
