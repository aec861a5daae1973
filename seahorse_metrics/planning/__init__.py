"""Planning: per-device memory of training and scoring, and the fit search.

* `memory`: `plan_memory` (the trainer's step and the scorer's first-step
  program compiled from shapes alone), `MemoryPlan`, `DeviceCorrection`,
  and `plan_in_subprocess` for meshes larger than this host.
* `programs`: those two programs compiled from shapes (`compile_train_step`,
  `plan_train_step`, `plan_scoring_step`) and each one's `StepMemory`.
* `fitting`: `search_fit`, the cheapest remat x microbatches x mesh that fits
  a device (`plan --fit`).
* `compile_only`: compiling for a GPU or TPU that is not here (`plan
  --compile_for`), the accelerator compiler's own figures.
* `child`: the child process both run in for simulated devices.
"""
