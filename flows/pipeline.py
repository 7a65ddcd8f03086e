"""The Prefect flow `rubricrl-pipeline` that prefect.yaml deploys (`entrypoint: flows/pipeline.py:pipeline`).

The flow is rubricrl/flow/pipeline.py's, imported as it is: `prefect deploy` and the worker's flow run load this
file by path and take `pipeline` from it (prefect.flows.load_flow_from_entrypoint), so a run is that flow object
itself. `rubricrl pipeline run` and `rubricrl pipeline serve` use it from the package directly.
"""

from rubricrl.flow.pipeline import pipeline

__all__ = ["pipeline"]
