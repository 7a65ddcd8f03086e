"""The Prefect flow over the DVC stage graph: runs, schedules and retriggers, the general-gate retrain, the
registry step, run status, and the pull steps of the GPU deployment. Nothing below this layer imports Prefect."""
