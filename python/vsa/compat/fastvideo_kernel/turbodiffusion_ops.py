"""fastvideo_kernel.turbodiffusion_ops: int8 linear layers and fused norms, not implemented by vsa
(each raises vsa.UnsupportedError when called or constructed)."""

from vsa.compat.fastvideo_kernel._unsupported import unsupported_class, unsupported_function

Int8Linear = unsupported_class("turbodiffusion_ops", "Int8Linear")
FastRMSNorm = unsupported_class("turbodiffusion_ops", "FastRMSNorm")
FastLayerNorm = unsupported_class("turbodiffusion_ops", "FastLayerNorm")
int8_linear = unsupported_function("turbodiffusion_ops", "int8_linear")
int8_quant = unsupported_function("turbodiffusion_ops", "int8_quant")
