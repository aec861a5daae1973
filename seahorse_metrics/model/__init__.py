"""The T5 v1.1 / mT5 network, its config presets and the model object around it."""

from seahorse_metrics.model.config import PRESETS, T5Config, get_config
from seahorse_metrics.model.model import EncoderDecoderModel
from seahorse_metrics.model.network import Transformer

__all__ = ["PRESETS", "T5Config", "get_config", "EncoderDecoderModel", "Transformer"]
