/* hierarchy_models.c — ovstage_get_hierarchy_computation_models: the three models 0.2.1 lists.
 * RUNTIME_DEFAULT is an id compute_hierarchy accepts (it names the process default), not a model of
 * its own, so it is not listed: NVIDIA's authoring-hierarchy example prints the list and its README
 * shows these three (docs/api.md, "Hierarchy computation"). */
#include <ovstage/ovstage.h>

#include "errors.h"

#define MODEL_DESC(id, nm, what)                                                                             \
	{                                                                                                    \
		(id), { nm, sizeof(nm) - 1 }, { what, sizeof(what) - 1 }                                     \
	}

static const ovstage_hierarchy_computation_model_desc_t g_models[] = {
	MODEL_DESC(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_CPU_INCREMENTAL, "cpu-incremental",
		   "world matrices on the CPU job system; recomputes only the subtrees whose inputs changed"),
	MODEL_DESC(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_INCREMENTAL, "gpu-incremental",
		   "world matrices as CUDA kernels, one launch per depth level; recomputes only the subtrees whose "
		   "inputs changed (NOT_SUPPORTED where no GPU is usable: CPU-only mode, no device, no CUDA build)"),
	MODEL_DESC(OVSTAGE_HIERARCHY_COMPUTATION_MODEL_GPU_GLOBAL, "gpu-global",
		   "every world matrix recomputed as CUDA kernels, one launch per depth level (NOT_SUPPORTED where no "
		   "GPU is usable: CPU-only mode, no device, no CUDA build)"),
};

OVSTAGE_API ovstage_api_status_t ovstage_get_hierarchy_computation_models(
	ovstage_instance_t *instance, const ovstage_hierarchy_computation_model_desc_t **out_models,
	size_t *out_model_count)
{
	static const char fn[] = "ovstage_get_hierarchy_computation_models";
	ovs_err_clear();
	if (out_models)
		*out_models = NULL;
	if (out_model_count)
		*out_model_count = 0;
	if (!instance || !out_models || !out_model_count)
		return ovs_err_set(OVSTAGE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
				   !instance ? "instance" : !out_models ? "out_models" : "out_model_count");
	*out_models = g_models; /* static: valid for any instance's lifetime (and beyond) */
	*out_model_count = sizeof g_models / sizeof g_models[0];
	return OVSTAGE_OK;
}
