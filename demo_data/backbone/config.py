"""The backbone's shape."""

from seahorse_metrics.model.config import T5Config

# Sentinels and padding room above the vocabulary's pieces, as mT5 keeps 100
# extra ids after its 250k pieces; the embedding is a multiple of 128 rows.
EXTRA_IDS = 100


def backbone_config(vocab_pieces: int) -> T5Config:
    """The backbone's architecture: mT5-shaped, 3 encoder layers, 1 decoder
    layer (the metric reads one decoder step), d_model 64."""
    vocab_size = -(-(vocab_pieces + EXTRA_IDS) // 128) * 128
    return T5Config(
        vocab_size=vocab_size,
        d_model=64,
        d_kv=16,
        num_heads=4,
        d_ff=192,
        num_encoder_layers=3,
        num_decoder_layers=1,
        dropout_rate=0.0,
    )
