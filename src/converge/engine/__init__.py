"""The convergence engine: stack operations as traversals, workers, sync points, the sweeper."""
