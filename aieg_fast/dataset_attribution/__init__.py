"""Attributions of whole datasets: :func:`attribute_dataset` (``aieg-fast attribute-dataset``).

* :mod:`.inputs` — the examples from a JSONL / JSON / CSV / TSV file, a DataFrame, a
  ``datasets.Dataset`` or a list (:func:`read_examples`);
* :mod:`.runner` — batches, the resumable records, data parallelism under torchrun;
* :mod:`.output` — the optional parquet copy.
"""
from .inputs import DEFAULT_COLUMNS, FILE_TYPES, Example, read_examples, read_examples_and_notes
from .output import write_parquet
from .runner import PARQUET_FILE, RECORDS_FILE, DatasetRun, attribute_dataset, plan_batches

__all__ = ["DEFAULT_COLUMNS", "DatasetRun", "Example", "FILE_TYPES", "PARQUET_FILE", "RECORDS_FILE", "attribute_dataset",
           "plan_batches", "read_examples", "read_examples_and_notes", "write_parquet"]
