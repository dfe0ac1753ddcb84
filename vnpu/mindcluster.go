package vnpu

import "fmt"

// MindCluster 310P template names.
const (
	Vir01        = "vir01"
	Vir02        = "vir02"
	Vir02C1      = "vir02_1c"
	Vir04        = "vir04"
	Vir04C3      = "vir04_3c"
	Vir04C3NDVPP = "vir04_3c_ndvpp"
	Vir04C4DVPP  = "vir04_4c_dvpp"
)

// Values of MindCluster's pod labels vnpu-level and vnpu-dvpp.
const (
	// LevelLow (the default) asks for the template with fewer AI CPUs.
	LevelLow = "low"
	// LevelHigh asks for the template with as many AI CPUs as AI cores.
	LevelHigh = "high"
	// DVPPYes asks for the chip's DVPP (vir04_4c_dvpp).
	DVPPYes = "yes"
	// DVPPNo asks for no DVPP (vir04_3c_ndvpp).
	DVPPNo = "no"
	// DVPPUnset is the absent label: share the DVPP.
	DVPPUnset = ""
)

// Ascend310P returns the MindCluster catalogue of an Atlas inference chip
// (Ascend 310P): 8 AI cores, 7 AI CPUs, 24 GiB, sliced into vir01 (1 core,
// 1 CPU, 3 GiB), vir02 (2, 2, 6 GiB), vir02_1c (2, 1, 6 GiB), vir04 (4, 4,
// 12 GiB), vir04_3c (4, 3, 12 GiB), vir04_3c_ndvpp (4, 3, 12 GiB, no DVPP)
// and vir04_4c_dvpp (4, 4, 12 GiB, all DVPP).
func Ascend310P() *Chip {
	const gib = 1024
	t := func(name string, core, cpu int32, mem int64, d DVPP) Template {
		return Template{Name: name, Resources: Resources{MemoryMiB: mem * gib, AICore: core, AICPU: cpu}, DVPP: d}
	}
	c, err := NewChip("310P3", Resources{MemoryMiB: 24 * gib, AICore: 8, AICPU: 7}, []Template{
		t(Vir01, 1, 1, 3, DVPPShared),
		t(Vir02, 2, 2, 6, DVPPShared),
		t(Vir02C1, 2, 1, 6, DVPPShared),
		t(Vir04, 4, 4, 12, DVPPShared),
		t(Vir04C3, 4, 3, 12, DVPPShared),
		t(Vir04C3NDVPP, 4, 3, 12, DVPPNone),
		t(Vir04C4DVPP, 4, 4, 12, DVPPAll),
	})
	if err != nil {
		// The catalogue is a constant; NewChip accepts it (tested).
		return nil
	}
	return c
}

// TemplateFor returns the MindCluster template for an AI-core request with
// the pod's vnpu-level and vnpu-dvpp labels ("" level means low). Requests
// for other core counts, or unknown label values, are an error naming the
// value and what is allowed.
func TemplateFor(cores int, level, dvpp string) (string, error) {
	switch level {
	case "":
		level = LevelLow
	case LevelLow, LevelHigh:
	default:
		return "", fmt.Errorf("vnpu-level=%q: want %s or %s", level, LevelLow, LevelHigh)
	}
	switch dvpp {
	case DVPPUnset, DVPPYes, DVPPNo, "null":
	default:
		return "", fmt.Errorf("vnpu-dvpp=%q: want %s, %s or nothing", dvpp, DVPPYes, DVPPNo)
	}
	switch cores {
	case 1:
		return Vir01, nil
	case 2:
		if level == LevelLow {
			return Vir02C1, nil
		}
		return Vir02, nil
	case 4:
		switch {
		case dvpp == DVPPYes:
			return Vir04C4DVPP, nil
		case dvpp == DVPPNo:
			return Vir04C3NDVPP, nil
		case level == LevelLow:
			return Vir04C3, nil
		default:
			return Vir04, nil
		}
	}
	return "", fmt.Errorf("%d AI cores: a vNPU has 1, 2 or 4 AI cores (more are whole chips)", cores)
}

// Downgrade returns the template with one AI CPU less that MindCluster falls
// back to when a node lacks AI CPUs for name (vir02 to vir02_1c, vir04 to
// vir04_3c); ok is false for templates without such a variant.
func Downgrade(name string) (string, bool) {
	switch name {
	case Vir02:
		return Vir02C1, true
	case Vir04:
		return Vir04C3, true
	}
	return "", false
}

// Ascend310PWithCores returns the MindCluster 310P catalogue for a chip of
// the given AI cores, as a node's servertype label states them (for example
// 8 in "Ascend310P-8"). Eight cores is Ascend310P. Other 310P models keep
// the 7 AI CPUs and the same templates, with 3 GiB of memory per AI core
// (the ratio of every 310P template), which MindCluster itself does not
// account: its slicing counts AI cores, AI CPUs and DVPP only. A chip too
// small for the vir04 templates is an error.
func Ascend310PWithCores(cores int32) (*Chip, error) {
	base := Ascend310P()
	if cores == base.Total.AICore {
		return base, nil
	}
	const mibPerCore = 3 * 1024
	return NewChip(base.Name, Resources{MemoryMiB: int64(cores) * mibPerCore, AICore: cores, AICPU: base.Total.AICPU},
		base.Templates())
}
