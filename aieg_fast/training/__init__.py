"""Training the models the evaluations need: :mod:`.nano`, the GPT-nano SST-2 classifier of the
AIEG paper (and its LLaMA-architecture twin), and :mod:`.sentiment`, the embedded SmolLM2 fine-tuned on SST-2 (or half of BoolQ) with LoRA."""
from .nano import LLAMA_NANO_CONFIG, NANO_CONFIG, NANO_NAME, nano_path, train_nano
from .sentiment import LORA_CONFIG, SST2_NAME, TRAIN_TASKS, sentiment_accuracy, train_sentiment

__all__ = ["LLAMA_NANO_CONFIG", "LORA_CONFIG", "NANO_CONFIG", "NANO_NAME", "SST2_NAME", "TRAIN_TASKS", "nano_path", "sentiment_accuracy", "train_nano", "train_sentiment"]
