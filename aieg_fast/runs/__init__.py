"""What long runs over many examples share: record files that survive a hard kill
(:mod:`.records`), the output folder and its per-process parts (:mod:`.folder`) and data
parallelism under torchrun (:mod:`.distributed`). Used by
:func:`aieg_fast.eval.evaluate` and :func:`aieg_fast.dataset_attribution.attribute_dataset`.

This package imports nothing else of the package.
"""
from .distributed import DIST_TIMEOUT, Dist, rank_device, reports_input_errors, shard, start, torchrun_rank, torchrun_world_size
from .folder import (COMMAND_FILE, CONFIG_FILE, LOCK_FILE, METHODS_FILE, PARTS_DIR, check_or_record_methods, check_or_write_config, check_recorded_config, claim_folder, differing_settings, holds_results, made_folder, part_files, part_path, record_former_setting, recorded_and_now, remove_parts, same_setting, setting_differences, writable_folder)
from .records import TORN_SUFFIX, append_jsonl, json_safe, read_jsonl, repair_jsonl, replace_file, write_jsonl

__all__ = ["COMMAND_FILE", "CONFIG_FILE", "LOCK_FILE", "holds_results", "METHODS_FILE", "check_or_record_methods", "record_former_setting", "DIST_TIMEOUT", "Dist", "PARTS_DIR", "TORN_SUFFIX", "append_jsonl", "check_or_write_config", "check_recorded_config", "claim_folder", "made_folder", "json_safe",
           "part_files", "part_path", "rank_device", "read_jsonl", "recorded_and_now", "remove_parts", "repair_jsonl", "replace_file", "same_setting", "setting_differences", "shard", "start",
           "torchrun_rank", "torchrun_world_size", "reports_input_errors", "writable_folder", "write_jsonl"]
