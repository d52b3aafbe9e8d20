"""CATERPILLAR (Li and Pedram): LAC processing element, LAC core with broadcast buses and a microcoded sequencer."""
