"""From a torchvision model to a first fault-injection result: docs/PYTHON.md."""
import torch
import torchvision

import bitflip

torch.manual_seed(0)
model = torchvision.models.resnet18(weights=None, num_classes=10)   # no download
images = torch.randn(32, 3, 64, 64)                                 # a stand-in eval set
bitflip.export(model, images[:1], "resnet18.onnx", eval_inputs=images, labels="model")

result = bitflip.run({"model": "resnet18.onnx", "dataset": "resnet18.eval.safetensors", "seed": 1,
                      "trials": 300, "faults": {"model": "bitflip", "bits": 1}})
print(result.to_pandas("outcomes"))
print(result.to_pandas("tensors").nlargest(5, "critical_rate")[["torch_name", "trials", "critical_rate"]])
bitflip.plot.summary(result, "resnet18_faults.png")
print("wrote resnet18_faults.png")
