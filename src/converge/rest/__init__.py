"""The REST face: Heat's orchestration v1 API and converge's own routes (an adapter over
``converge.api``; the error boundary is ``rest.errors``, serving is ``rest.server``)."""
