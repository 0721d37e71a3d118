package api

type VersionSuite struct{}

func (suite *VersionSuite) SuiteName() string { return "api.VersionSuite" }

func (suite *VersionSuite) SetupTest() {}

func (suite *VersionSuite) TestExpectedVersionMaster() {}

func (suite *VersionSuite) TestSameVersionCluster() {}

func (suite *VersionSuite) helper() {}

// notASuite has tests but no SuiteName: testify never runs it alone.
type notASuite struct{}

func (n notASuite) TestNothing() {}
