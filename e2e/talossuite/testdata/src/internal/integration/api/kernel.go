package api

type KernelSuite struct{}

func (suite *KernelSuite) SuiteName() string {
	return "api.KernelSuite"
}

func (suite *KernelSuite) TestCmdline() {}
