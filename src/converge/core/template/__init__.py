"""HOT and CFN templates: loading, environments, parameters, conditions and validated stacks.

The public API the engine and the CLI use; everything else in this package is detail.
"""

from converge.core.template.context import ResourceData, StackIdentity, pseudo_parameters
from converge.core.template.definitions import (
    OutputDefinition,
    ResourceDefinition,
    StackDefinition,
)
from converge.core.template.environment import (
    Environment,
    ResourceEntry,
    environment_from_data,
    load_environment,
    merge_environments,
)
from converge.core.template.loader import DEFAULT_LIMITS, Limits
from converge.core.template.nodes import ALL_ATTRIBUTES
from converge.core.template.parameters import PSEUDO_PARAMETERS, ParameterSchema, ParameterType
from converge.core.template.prepare import prepare_stack, provider_schema
from converge.core.template.template import Template, load_template, template_from_data

__all__ = [
    "ALL_ATTRIBUTES",
    "DEFAULT_LIMITS",
    "PSEUDO_PARAMETERS",
    "Environment",
    "Limits",
    "OutputDefinition",
    "ParameterSchema",
    "ParameterType",
    "ResourceData",
    "ResourceDefinition",
    "ResourceEntry",
    "StackDefinition",
    "StackIdentity",
    "Template",
    "environment_from_data",
    "load_environment",
    "load_template",
    "merge_environments",
    "prepare_stack",
    "provider_schema",
    "pseudo_parameters",
    "template_from_data",
]
