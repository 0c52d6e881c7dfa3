"""One ModelWeightLoader per model family; `atlas.model.factory` picks one by model_type."""
